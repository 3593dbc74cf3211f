"""Every API the broker decodes has exactly one handler.

A broker in a ZooKeeper cluster serves every API in ``protocol/apis.py`` (Kafka's ZooKeeper-mode
broker answers all of them, the inter-broker ones included); a standalone broker serves all but
the cluster's own (inter-broker requests and reassignments, which need a controller elsewhere).
Two handlers for one API make the broker refuse to start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.protocol.apis import API_SPECS, ApiKey
from headwater.server import broker as broker_module
from headwater.server.apis.metadata import MetadataApis
from headwater.server.broker import Broker
from headwater.server.config import broker_config

CLUSTER_ONLY = {ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA, ApiKey.ALTER_PARTITION,
                ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS}


def make(tmp_path: Path, **props: str) -> Broker:
    return Broker(broker_config({"broker.id": "1", "log.dirs": str(tmp_path / "logs"),
                                 "listeners": "PLAINTEXT://127.0.0.1:1", **props}))


def test_a_cluster_member_handles_every_api(tmp_path: Path) -> None:
    b = make(tmp_path, **{"zookeeper.connect": "127.0.0.1:1"})  # not started: nothing connects
    try:
        assert b.handled_apis == set(API_SPECS)
    finally:
        b.authz.close()


def test_a_standalone_broker_handles_all_but_the_cluster_apis(tmp_path: Path) -> None:
    b = make(tmp_path)
    try:
        assert b.handled_apis == set(API_SPECS) - CLUSTER_ONLY
    finally:
        b.authz.close()


def test_two_handlers_for_one_api_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = MetadataApis.handlers

    def with_produce(self: MetadataApis) -> dict[int, object]:
        return {**original(self), ApiKey.PRODUCE: self.metadata}

    monkeypatch.setattr(broker_module.MetadataApis, "handlers", with_produce)
    with pytest.raises(AssertionError, match="two handlers for PRODUCE"):
        make(tmp_path)
