"""Snapshot files, Kafka's reassignment JSON, the scheduler and the independent evaluator."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from planner_helpers import plan, replica_sets

from headwater.planner.engine import LocalEngine, evaluate_plan
from headwater.planner.errors import PlannerError
from headwater.planner.generate import ClusterSpec, generate
from headwater.planner.model import Broker, PlanOptions
from headwater.planner.reassignment import Change, ReassignmentWriter, Scheduler, read_reassignment
from headwater.planner.snapshot import Snapshot, read_snapshot, wide_frame, write_snapshot


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_snapshot_round_trip(tmp_path: Path, suffix: str) -> None:
    snap = generate(ClusterSpec(brokers=6, racks=3, partitions=40, dead_brokers=1, seed=1))
    path = tmp_path / f"s{suffix}"
    write_snapshot(path, snap.brokers, snap.partitions)
    back = read_snapshot(path)
    assert back.brokers == snap.brokers
    assert replica_sets(back) == replica_sets(snap)
    assert back.partitions["size_bytes"].tolist() == snap.partitions["size_bytes"].tolist()


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


BROKERS = [
    '{"type":"broker","id":1,"rack":"a"}',
    '{"type":"broker","id":2,"rack":"b"}',
    '{"type":"broker","id":3,"rack":"c"}',
]


def _plan_file(path: Path) -> None:
    snap = read_snapshot(path)
    engine = LocalEngine(snap, str(path))
    from headwater.planner.engine import run_plan

    run_plan(engine, PlanOptions())


def test_corrupt_line_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, [*BROKERS, '{"type":"partition","topic":"t",'])
    with pytest.raises(PlannerError, match="line 4: not valid JSON"):
        read_snapshot(path)


def test_unknown_broker_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, [*BROKERS, '{"type":"partition","topic":"t","partition":0,"replicas":[1,2,9]}'])
    with pytest.raises(PlannerError, match=r"unknown broker.*t-0 on broker 9"):
        _plan_file(path)


def test_rf_beyond_brokers_is_named(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            *BROKERS,
            '{"type":"broker","id":4,"rack":"a","alive":false}',
            '{"type":"partition","topic":"t","partition":0,"replicas":[1,2,3,4]}',
        ],
    )
    with pytest.raises(PlannerError, match=r"replication factor 4 \(of partition t-0\) is larger than the 3"):
        _plan_file(path)


def test_rf_beyond_racks_is_named(tmp_path: Path) -> None:
    lines = [
        '{"type":"broker","id":1,"rack":"a"}',
        '{"type":"broker","id":2,"rack":"a"}',
        '{"type":"broker","id":3,"rack":"a"}',
        '{"type":"broker","id":4,"rack":"b"}',
        '{"type":"partition","topic":"t","partition":0,"replicas":[1,2,4]}',
    ]
    # 3 replicas over 2 racks allows 2 per rack; rack b has a single broker, so 2 + 1 = 3 fits.
    _plan_file(_write(tmp_path, lines))
    lines[-1] = '{"type":"partition","topic":"t","partition":0,"replicas":[1,2,3,4]}'
    with pytest.raises(PlannerError, match="cannot be spread over the 2 rack"):
        _plan_file(_write(tmp_path, lines))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ('{"type":"partition","topic":"t","partition":0,"replicas":[]}', "no replicas"),
        ('{"type":"partition","topic":"t","partition":0,"replicas":[1,1]}', "broker twice"),
        ('{"type":"partition","topic":"t","partition":0,"replicas":[1,2],"leader":3}', "leader"),
        ('{"type":"thing"}', "unknown record type"),
        ('{"type":"partition","topic":"t","partition":"x","replicas":[1]}', "'partition' must be an integer"),
    ],
)
def test_bad_records(tmp_path: Path, record: str, message: str) -> None:
    with pytest.raises(PlannerError, match=message):
        _plan_file(_write(tmp_path, [*BROKERS, record]))


def test_corrupt_parquet(tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(PlannerError, match="not a readable Parquet file"):
        read_snapshot(path)


def test_mixed_rack_information_is_refused() -> None:
    brokers = [Broker(1, "a"), Broker(2, None), Broker(3, "b")]
    frame = wide_frame(["t"], [0], [[1, 2]], [1], [1])
    with pytest.raises(PlannerError, match="not all brokers have a rack"):
        plan(Snapshot(brokers, frame))


def test_reassignment_json_is_kafkas_format() -> None:
    out = io.StringIO()
    w = ReassignmentWriter(out)
    w.add(Change("bar", 0, (1, 2), (7, 8), 10, 1))
    w.add(Change("foo", 1, (1, 2, 3), (3, 2, 1), 10, 1))
    w.close()
    assert out.getvalue() == (
        '{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[7,8],"log_dirs":["any","any"]},'
        '{"topic":"foo","partition":1,"replicas":[3,2,1],"log_dirs":["any","any","any"]}]}'
    )


def test_read_reassignment_rules(tmp_path: Path) -> None:
    p = tmp_path / "plan.json"
    p.write_text('{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,1]}]}')
    with pytest.raises(PlannerError, match="duplicate entries"):
        read_reassignment(p)
    p.write_text('{"version":2,"partitions":[]}')
    with pytest.raises(PlannerError, match="Not supported version field value 2"):
        read_reassignment(p)
    p.write_text('{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}')
    with pytest.raises(PlannerError, match="Size of replicas list"):
        read_reassignment(p)
    p.write_text('{"partitions":[{"topic":"a","partition":0,"replicas":[1,2]}]}')
    assert read_reassignment(p) == {("a", 0): [1, 2]}


def test_scheduler_respects_per_broker_concurrency() -> None:
    sched = Scheduler(concurrency=2, throttle_bytes_per_s=100.0)
    batches = [sched.add(Change("t", i, (1, 2), (1, 3), 1000, 1)) for i in range(5)]
    # Broker 1 sends every move and broker 3 receives every move: two per batch.
    assert batches == [0, 0, 1, 1, 2]
    summary = sched.summary()
    assert summary["batches"] == 3
    assert summary["estimated_duration_s"] == pytest.approx(20.0 + 20.0 + 10.0)
    assert sched.add(Change("t", 9, (1, 2), (2, 1), 1000, 1)) == -1  # a reorder moves no data


def test_evaluator_scores_a_foreign_plan_independently(tmp_path: Path) -> None:
    brokers = [Broker(1, "a"), Broker(2, "b"), Broker(3, "a"), Broker(4, "b")]
    frame = wide_frame(["t", "t"], [0, 1], [[1, 2], [2, 1]], [1, 2], [100, 50])
    snap = Snapshot(brokers, frame)
    # Partition 0 moves to 3,4 (two moves, 200 bytes); partition 1 moves to 1,3 (one move, two racks 'a').
    plan_doc = {("t", 0): [3, 4], ("t", 1): [1, 3]}
    report = evaluate_plan(LocalEngine(snap), plan_doc, PlanOptions(), 5, 10.0)
    assert report["replica_moves"] == 3
    assert report["bytes_moved"] == 250
    assert report["violations"]["rack_after"] == 1
    assert report["max_inbound"] == {"broker": 3, "bytes": 150}
    assert report["max_outbound"] == {"broker": 1, "bytes": 200}
    assert report["leader_changes"] == 2
    json.dumps(report)


def test_evaluator_refuses_unknown_partitions() -> None:
    snap = generate(ClusterSpec(brokers=6, racks=3, partitions=10, seed=2))
    with pytest.raises(PlannerError, match="not in snapshot"):
        evaluate_plan(LocalEngine(snap), {("nope", 0): [1, 2, 3]}, PlanOptions(), 5, 10.0)
