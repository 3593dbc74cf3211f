"""The console's second slice, without a cluster: the heat maps, the quotas and the Plan page's
planning (the planner's engines on a poll's answers: which one runs, and Spark's session kept by
the console). Its HTTP surface is in test_console_app.py."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
from console_fakes import MB, FakeSpark
from console_fakes import cluster_facts as _facts

from headwater.admin.reassign import Ongoing
from headwater.admin.security import PLAINTEXT
from headwater.console import model
from headwater.console.model import PartitionFacts, QuotaFacts
from headwater.console.plan import (
    SPARK_ABOVE_REPLICAS,
    Plan,
    PlanStore,
    SparkPlanner,
    choose_engine,
    execution_model,
    facts_snapshot,
    make_plan,
    parse_goal,
    replica_count,
    stale_partitions,
)
from headwater.console.reader import Poller, parse_tokens, quota_facts
from headwater.planner.errors import PlannerError
from headwater.planner.model import Goal


def test_heatmap_counts_replicas_and_bytes_per_broker_and_topic() -> None:
    f = _facts()
    f.topics["u"] = {0: PartitionFacts(1, (1,), (1,))}
    f.log_dirs[1][0].sizes[("u", 0)] = 10  # type: ignore[index]  # a plain dict under the Mapping
    hm = model.heatmap_model(f)
    assert hm["brokers"] == [1, 2, 3, 4]
    t, u = hm["topics"]
    assert t["topic"] == "t" and u["topic"] == "u"
    assert {b: c["value"] for b, c in t["replicas"].items()} == {"1": 4, "2": 4, "3": 4, "4": 0}
    assert t["bytes"]["1"] == {"value": 4 * MB, "level": model.HEAT_LEVELS}
    assert t["replicas"]["4"] == {"value": 0, "level": 0}  # the empty broker: a column with no heat
    assert u["replicas"]["1"]["level"] == 2 and u["bytes"]["1"]["level"] == 1  # small but not nothing


def test_quotas_with_and_without_tokens() -> None:
    resp = NS(error_code=0, error_message=None, entries=[
        NS(entity=[NS(entity_type="user", entity_name="alice")], values=[NS(key="controller_mutation_rate", value=5.0)]),
        NS(entity=[NS(entity_type="client-id", entity_name=None)], values=[NS(key="controller_mutation_rate", value=2.0)]),
        NS(entity=[NS(entity_type="user", entity_name="bob"), NS(entity_type="client-id", entity_name="app")],
           values=[NS(key="controller_mutation_rate", value=1.0)]),
        NS(entity=[NS(entity_type="user", entity_name="carol")], values=[NS(key="producer_byte_rate", value=9.0)]),
    ])
    quotas = quota_facts(resp)
    assert quotas[0] == QuotaFacts((("user", "alice"),), {"controller_mutation_rate": 5.0})
    tokens = parse_tokens(
        '# TYPE headwater_controller_mutation_remaining_tokens gauge\n'
        'headwater_controller_mutation_remaining_tokens{broker="1",user="alice",client_id=""} -3.5\n'
        'headwater_controller_mutation_remaining_tokens{broker="1",user="",client_id="<default>"} 2.0\n')
    assert tokens == {("alice", ""): -3.5, ("", "<default>"): 2.0}
    m = model.quotas_model(quotas, tokens)
    rows = {(r["user"], r["client_id"]): r for r in m["quotas"]}
    assert set(rows) == {("alice", None), (None, "<default>"), ("bob", "app")}  # carol has no mutation rate
    assert rows[("alice", None)]["state"] == "throttled" and rows[("alice", None)]["tokens"] == -3.5
    assert rows[(None, "<default>")]["state"] == "ok"
    assert rows[("bob", "app")]["state"] == "idle" and rows[("bob", "app")]["tokens"] is None
    plain = model.quotas_model(quotas, None)
    assert not plain["metrics"] and all(r["state"] is None for r in plain["quotas"])
    failed = model.quotas_model(None, None, "DescribeClientQuotas: boom")
    assert not failed["available"] and failed["error"] == "DescribeClientQuotas: boom"
    with pytest.raises(Exception, match="nope"):
        quota_facts(NS(error_code=35, error_message="nope", entries=[]))


def test_snapshot_from_facts_marks_missing_brokers_dead() -> None:
    f = _facts(brokers=(1, 2, 4))  # broker 3 holds replicas but is not registered
    snap = facts_snapshot(f)
    alive = {b.id: b.alive for b in snap.brokers}
    assert alive == {1: True, 2: True, 3: False, 4: True}
    assert sorted(snap.partitions["size_bytes"].tolist()) == [MB] * 6


def test_add_brokers_plan_moves_replicas_to_the_new_broker() -> None:
    f = _facts()
    plan = make_plan(f, Goal.ADD_BROKERS, (4,))
    v = plan.view
    assert v["moves"] and all(4 in m["to"] and m["adding"] == [4] for m in v["moves"])
    per = {b["id"]: b for b in v["per_broker"]}
    assert per[4]["replicas"][0] == 0 and per[4]["replicas"][1] == 3  # 12 replicas over 4 brokers
    assert all(per[b]["replicas"] == [4, 3] for b in (1, 2, 3))
    assert v["summary"]["replica_moves"] == 3 and v["summary"]["bytes_moved"] == 3 * MB
    assert plan.basis == {tp: list(f.topics["t"][tp[1]].replicas) for tp in plan.targets}
    assert plan.reassignment_json.startswith('{"version":1,"partitions":[')
    assert '"replicas":[' in plan.reassignment_json and plan.reassignment_json.count('"topic":"t"') == len(plan.targets)
    assert stale_partitions(plan, {tp: list(r) for tp, r in plan.basis.items()}) == []
    moved = dict(plan.basis) | {next(iter(plan.basis)): [9, 9]}
    assert stale_partitions(plan, moved) == [f"t-{next(iter(plan.basis))[1]}"]


def test_fix_dead_and_remove_brokers_plans() -> None:
    dead = make_plan(_facts(brokers=(1, 2, 4)), Goal.FIX_DEAD, ())
    assert dead.targets and all(3 not in r for r in dead.targets.values())
    removed = make_plan(_facts(), Goal.REMOVE_BROKERS, (1,))
    assert all(1 not in r for r in removed.targets.values())
    assert {b["id"]: b["replicas"][1] for b in removed.view["per_broker"]}[1] == 0
    with pytest.raises(PlannerError, match="unknown broker"):
        make_plan(_facts(), Goal.ADD_BROKERS, (7,))


def test_parse_goal() -> None:
    assert parse_goal("add-brokers", [5, 4, 4]) == (Goal.ADD_BROKERS, (4, 5))
    assert parse_goal("rebalance", [4]) == (Goal.REBALANCE, ())
    for goal, brokers, match in [("nope", [], "unknown goal"), ("replication-factor", [], "does not plan"),
                                 ("add-brokers", [], "needs the ids"), ("remove-brokers", ["x"], "list of broker ids")]:
        with pytest.raises(PlannerError, match=match):
            parse_goal(goal, brokers)


def test_execution_progress_and_preferred_leaders() -> None:
    f = _facts()
    plan = make_plan(f, Goal.ADD_BROKERS, (4,))
    tps = sorted(plan.targets)
    f.ongoing = {tp: Ongoing([*plan.basis[tp], 4], [4], [b for b in plan.basis[tp] if b not in plan.targets[tp]])
                 for tp in tps}
    x = execution_model(plan, 5.0, f, ["started"], None)
    assert x is not None and len(x["in_flight"]) == len(tps) and x["done"] == 0 and not x["finished"]
    # The moves end: the partitions have their targets, led by a replica that is not the first.
    f.ongoing = {}
    for t, p in tps:
        target = tuple(plan.targets[(t, p)])
        f.topics[t][p] = PartitionFacts(target[-1], target, target)
    x = execution_model(plan, 5.0, f, ["started"], None)
    assert x is not None and x["finished"] and x["done"] == len(tps)
    assert x["not_preferred"] == [f"{t}-{p}" for t, p in tps if len(plan.targets[(t, p)]) > 1]
    assert execution_model(None, None, f, [], None) is None
    store = PlanStore(kept=1)
    store.add(plan)
    other = Plan("other", "leaders", (), 0.0, {}, {}, "{}")
    store.add(other)
    assert store.get(plan.id) is None and store.get("other") is other


def test_auto_engine_picks_spark_above_the_threshold() -> None:
    assert SPARK_ABOVE_REPLICAS == 200_000
    assert choose_engine("auto", 200_000)[0] == "local"
    assert choose_engine("auto", 200_001)[0] == "spark"
    assert choose_engine("auto", 12, spark_above=5) == ("spark", "auto: 12 replicas, more than 5")
    assert choose_engine("spark", 1)[0] == "spark" and choose_engine("local", 10**9)[0] == "local"
    for bad in ("Spark", None, 1, ["local"]):
        with pytest.raises(PlannerError, match="unknown engine"):
            choose_engine(bad, 1)


def test_spark_plans_through_the_runner_and_auto_follows_the_cluster_size() -> None:
    f = _facts()
    assert replica_count(f) == 12
    spark = FakeSpark()
    local = make_plan(f, Goal.ADD_BROKERS, (4,))
    assert local.view["engine"] | {"timings_s": None} == {
        "name": "local", "requested": "auto", "why": "auto: 12 replicas, not more than 200,000", "replicas": 12,
        "master": None, "timings_s": None}
    assert spark.plans == 0
    big = make_plan(f, Goal.ADD_BROKERS, (4,), engine="auto", spark=spark, spark_above=11)
    assert spark.plans == 1 and big.view["engine"]["name"] == "spark" and big.view["engine"]["master"] == "local[fake]"
    assert "plan_s" in big.view["engine"]["timings_s"] and "spark_start_s" in big.view["engine"]["timings_s"]
    assert big.targets == local.targets and big.reassignment_json == local.reassignment_json
    with pytest.raises(PlannerError, match="no Spark engine"):
        make_plan(f, Goal.ADD_BROKERS, (4,), engine="spark")


def test_spark_planner_starts_nothing_until_asked_and_refuses_after_stop() -> None:
    planner = SparkPlanner("local[3]")
    assert not planner.started and planner.master == "local[3]"
    planner.stop()  # never started: nothing to stop
    with pytest.raises(PlannerError, match="stopping"), planner.engine(facts_snapshot(_facts()), {}):
        pass
    assert not planner.started
    # The console's poller owns one (never started here: no poll, no plan) and stops it with itself.
    poller = Poller("127.0.0.1:1", PLAINTEXT, spark_master="spark://elsewhere:7077")
    assert poller.spark.master == "spark://elsewhere:7077" and not poller.spark.started
    poller.stop()
    poller.facts = _facts()
    assert poller.make_plan("rebalance", [], engine="local")["engine"]["name"] == "local"
    with pytest.raises(PlannerError, match="stopping"):
        poller.make_plan("rebalance", [], engine="spark")
