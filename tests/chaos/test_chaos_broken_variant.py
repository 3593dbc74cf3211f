"""The checker can fail against real brokers, not only against made-up histories: a deliberately
broken variant of the broker acknowledges acks=all produces as soon as the leader has the records
(a high watermark that runs ahead of the ISR), with followers that fetch only once a second. Killing
the leader then loses acknowledged records, and the checker must say so.

The variant is built without touching the package: the brokers of this test start with a
``sitecustomize`` module on their PYTHONPATH that patches two methods before they run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chaos_run import Scenario, run_scenario

BROKEN_BROKER = '''
"""Loaded by the brokers of the broken-variant chaos test only."""
import asyncio

from headwater.protocol.errors import ErrorCode
from headwater.replication import partition
from headwater.server import channel


def _ack_at_once(self, required_offset):
    # acks=all done on the leader's own append: the high watermark no longer waits for the ISR.
    if self._role is not partition.Role.LEADER:
        return partition.AckCheck(True, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return partition.AckCheck(True, ErrorCode.NONE)


_request = channel.BrokerChannel.request


async def _slow_fetch(self, request, version, *args, **kwargs):
    # Followers fetch once a second, so a leader always holds records no follower has yet. A
    # follower's fetch is written by hand (control_wire.EncodedRequest, api key 1); any other
    # fetch is the codec's FetchRequest.
    if getattr(request, "api_key", None) == 1 or type(request).__name__.startswith("FetchRequest"):
        await asyncio.sleep(1.0)
    return await _request(self, request, version, *args, **kwargs)


partition.PartitionReplica.ack_check = _ack_at_once
channel.BrokerChannel.request = _slow_fetch
'''


def test_the_checker_catches_a_broker_that_acknowledges_before_replicating(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    patch_dir = tmp_path / "broken-broker"
    patch_dir.mkdir()
    (patch_dir / "sitecustomize.py").write_text(BROKEN_BROKER)
    # The broker processes inherit this environment (ip netns exec keeps it).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(patch_dir), os.environ.get("PYTHONPATH")) if p))
    # Down for twice the 4 s ZooKeeper session: leadership surely moves to a follower without the
    # records. A leader back within its session could be elected again, holding everything (it
    # happened once in CI, on a loaded machine, with 3 s).
    outcome = run_scenario(Scenario("kill", seed=1, rounds=1, fault_s=(8.0, 8.0)), tmp_path / "run")
    print(outcome.report())
    assert outcome.verdict.violations.get("lost"), f"the checker missed the lost records: {outcome.report()}"
