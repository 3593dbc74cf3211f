"""KIP-1066 in the planner: a broker whose every log dir is cordoned is drained and never targeted.

Kafka 4.3 only keeps new partitions off a cordoned broker (``ClusterControlManager.usableBrokers``); the
operator's next step is to move its replicas away (KIP-1066's decommissioning flow: cordon, reassign,
then stop), which is what the planner does with it for every goal that moves replicas.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from planner_helpers import applied, plan, replica_sets

from headwater.planner.errors import PlannerError
from headwater.planner.generate import ClusterSpec, generate
from headwater.planner.live import cordoned_brokers, snapshot_from_metadata
from headwater.planner.model import Goal, PlanOptions
from headwater.planner.snapshot import Snapshot, read_snapshot, write_snapshot


def cordon(snap: Snapshot, *ids: int) -> Snapshot:
    return Snapshot([replace(b, cordoned=b.id in ids) for b in snap.brokers], snap.partitions)


@pytest.mark.parametrize("goal", [Goal.REBALANCE, Goal.FIX_DEAD])
def test_a_cordoned_broker_is_drained_and_receives_nothing(goal: Goal) -> None:
    snap = cordon(generate(ClusterSpec(brokers=9, racks=3, partitions=120, seed=21)), 4)
    before = replica_sets(snap)
    report, _, engine = plan(snap, PlanOptions(goal=goal))
    after = replica_sets(applied(snap, engine))
    assert not any(4 in r for r in after.values())
    assert report["violations"]["rack_after"] == 0
    # Nothing lands on 4, and only what 4 held (plus balancing) moved.
    assert all(4 not in set(after[k]) - set(before[k]) for k in before)


def test_leaders_goal_moves_only_leadership_off_a_cordoned_broker() -> None:
    snap = cordon(generate(ClusterSpec(brokers=6, racks=3, partitions=60, seed=22)), 2)
    _report, _, engine = plan(snap, PlanOptions(goal=Goal.LEADERS))
    after = replica_sets(applied(snap, engine))
    assert {k: sorted(v) for k, v in after.items()} == {k: sorted(v) for k, v in replica_sets(snap).items()}
    assert not any(r[0] == 2 for r in after.values())


def test_adding_a_cordoned_broker_is_refused() -> None:
    snap = cordon(generate(ClusterSpec(brokers=6, racks=3, partitions=30, new_brokers=1, seed=23)), 7)
    with pytest.raises(PlannerError, match="cordoned"):
        plan(snap, PlanOptions(goal=Goal.ADD_BROKERS, brokers=(7,)))


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_snapshot_files_keep_the_cordoned_flag(tmp_path: Path, suffix: str) -> None:
    snap = cordon(generate(ClusterSpec(brokers=4, racks=2, partitions=8, seed=24)), 3)
    path = tmp_path / f"s{suffix}"
    write_snapshot(path, snap.brokers, snap.partitions)
    assert [b.cordoned for b in read_snapshot(path).brokers] == [False, False, True, False]


def test_live_cluster_cordoned_brokers() -> None:
    log_dirs = [{"broker": 1, "log_dirs": [{"log_dir": "/d/a", "topics": []}, {"log_dir": "/d/b", "topics": []}]},
                {"broker": 2, "log_dirs": [{"log_dir": "/d/a", "topics": []}]},
                {"broker": 3, "log_dirs": [{"log_dir": "/d/a", "topics": []}, {"log_dir": "/d/b", "topics": []}]}]
    # Broker 1: both dirs; 2: '*'; 3: one of two (still takes replicas); 4: the config unknown (Kafka 3.9).
    values = {1: "/d/b, /d/a/", 2: "*", 3: "/d/a"}
    assert cordoned_brokers(values, log_dirs) == {1, 2}
    snap = snapshot_from_metadata({"brokers": [{"broker_id": b, "rack": None} for b in (1, 2, 3, 4)]}, [], log_dirs,
                                  {}, None, {1, 2})
    assert [b.cordoned for b in snap.brokers] == [True, True, False, False]
    assert np.array_equal(np.array([b.id for b in snap.brokers]), np.array([1, 2, 3, 4]))
