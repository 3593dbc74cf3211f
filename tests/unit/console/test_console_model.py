"""The console's page models from Kafka answers (headwater/console/model.py, reader.py's converters)."""

from __future__ import annotations

from types import SimpleNamespace as NS

from headwater.admin.reassign import FOLLOWER_THROTTLED_REPLICAS, Ongoing
from headwater.console import model
from headwater.console.model import BrokerFacts, Facts, LogDirFacts, MoveMetric, PartitionFacts
from headwater.console.reader import config_values, log_dir_facts, metadata_facts, parse_metrics


def _facts() -> Facts:
    f = Facts(taken_at=100.0, controller_id=2)
    f.brokers = {b: BrokerFacts(b, "127.0.0.1", 9090 + b, f"r{b}") for b in (1, 2, 3)}
    f.topics = {
        "t": {0: PartitionFacts(1, (1, 2), (1, 2)),
              1: PartitionFacts(2, (1, 2), (2,)),          # preferred leader 1 is not leading; under-replicated
              2: PartitionFacts(-1, (4, 3), (), (4,))},     # offline, on broker 4 that is not registered
    }
    f.topic_configs = {"t": {"min.insync.replicas": "2"}}
    f.log_dirs = {1: [LogDirFacts("/d1", None, {("t", 0): 100, ("t", 1): 50})],
                  2: [LogDirFacts("/d2", None, {("t", 0): 100, ("t", 1): 60})]}
    return f


def test_metadata_answer_into_facts() -> None:
    resp = NS(cluster_id="c1", controller_id=3, brokers=[NS(node_id=3, host="h", port=1, rack=None)],
              topics=[NS(name="a", error_code=0, partitions=[NS(partition_index=0, leader_id=3, replica_nodes=[3],
                                                                isr_nodes=[3], offline_replicas=[])]),
                      NS(name="b", error_code=29, partitions=[])])
    f = Facts(taken_at=0)
    metadata_facts(resp, f)
    assert f.controller_id == 3 and f.brokers[3].host == "h"
    assert f.topics == {"a": {0: PartitionFacts(3, (3,), (3,))}}
    assert f.errors == ["Metadata for topic b: TOPIC_AUTHORIZATION_FAILED"]


def test_log_dirs_and_configs_answers() -> None:
    resp = NS(results=[NS(log_dir="/x", error_code=0, topics=[NS(name="t", partitions=[
        NS(partition_index=0, partition_size=7), NS(partition_index=1, partition_size=3)])]),
        NS(log_dir="/y", error_code=56, topics=[])])
    dirs = log_dir_facts(resp)
    assert dirs[0].bytes == 10 and dirs[0].error is None
    assert dirs[1].error == "KAFKA_STORAGE_ERROR"
    configs = NS(results=[NS(resource_name="1", error_code=0, configs=[NS(name="k", value="v")]),
                          NS(resource_name="2", error_code=29, configs=[])])
    assert config_values(configs) == {"1": {"k": "v"}}


def test_brokers_health_and_leader_imbalance() -> None:
    f = _facts()
    rows = {r["id"]: r for r in model.brokers_model(f)}
    assert set(rows) == {1, 2, 3, 4}
    assert rows[2]["controller"] and not rows[1]["controller"]
    assert rows[4]["alive"] is False and "down" in rows[4]["error"]
    assert rows[3]["alive"] and not rows[3]["reachable"]  # registered, but its log dirs did not answer
    assert rows[1]["replicas"] == 2 and rows[1]["leaders"] == 1 and rows[1]["bytes"] == 150
    assert (rows[1]["preferred"], rows[1]["imbalance"], rows[1]["imbalance_pct"]) == (2, 1, 50.0)
    assert model.health(f) == {"under_replicated": ["t-1", "t-2"], "under_min_isr": ["t-1", "t-2"],
                               "offline": ["t-2"]}


def test_topics_sizes() -> None:
    t = model.topics_model(_facts())[0]
    assert t["name"] == "t"
    p1 = t["partitions"][1]
    assert p1["size"] == 60 and p1["sizes"] == {"1": 50, "2": 60}  # the leader's replica
    assert t["bytes"] == 100 + 60 + 0


def test_moves_progress_rate_and_throttle() -> None:
    f = _facts()
    f.ongoing = {("t", 0): Ongoing([1, 2, 3], [3], [1]), ("t", 1): Ongoing([1, 2], [], [])}
    f.log_dirs[3] = [LogDirFacts("/d3", None, {("t", 0): 25})]
    f.topic_configs["t"][FOLLOWER_THROTTLED_REPLICAS] = "0:3"
    f.broker_configs = {3: {"follower.replication.throttled.rate": "1000"}}
    rates = model.RateTracker()
    rates.observe(10.0, {("t", 0, 3): 5})
    rates.observe(12.0, model.copied_bytes(f))
    moves = model.moves_model(f, rates)
    m0, m1 = moves
    assert (m0["from"], m0["to"], m0["adding"], m0["removing"]) == ([1, 2], [2, 3], [3], [1])
    assert (m0["copied"], m0["total"], m0["share"]) == (25, 100, 0.25)
    assert m0["rate"] == 10.0 and m0["eta_s"] == 7.5 and m0["rate_source"] == "estimate"
    assert m0["throttled"] and not m0["queued"]
    assert m1["queued"] and m1["share"] == 1.0 and not m1["throttled"]
    overall = model.overall(moves)
    assert (overall["copied"], overall["total"], overall["eta_s"]) == (25, 100, 7.5)
    assert model.overall([])["share"] == 1.0


def test_broker_metrics_win_over_the_estimate() -> None:
    f = _facts()
    f.ongoing = {("t", 0): Ongoing([1, 2, 3], [3], [1])}
    f.move_metrics = {("t", 0, 3, "leader"): MoveMetric(100, 40, 20.0, -1), ("t", 0, 3, "follower"): MoveMetric(-1, 40, 1.0, 9)}
    (m,) = model.moves_model(f)
    assert m["rate"] == 20.0 and m["rate_source"] == "metrics"
    assert m["eta_s"] == 5.0  # the leader's ETA is unknown (-1): 100 bytes left at 20 B/s


def test_outcome_of_an_ended_move() -> None:
    move = {"from": [1, 2], "to": [3, 4]}
    assert model.outcome(move, [4, 3]) == "completed"
    assert model.outcome(move, [1, 2]) == "cancelled"
    assert model.outcome(move, [1, 2, 3, 4]) == "ending"
    assert model.outcome(move, None) == "topic deleted"


def test_throttle_model() -> None:
    f = Facts(taken_at=0)
    f.broker_configs = {1: {"leader.replication.throttled.rate": "500", "follower.replication.throttled.rate": "500"},
                        2: {"leader.replication.throttled.rate": None}}
    assert model.throttle_model(f)["rate"] == "500" and not model.throttle_model(f)["mixed"]
    f.broker_configs[2] = {"leader.replication.throttled.rate": "9"}
    assert model.throttle_model(f)["mixed"]


def test_prometheus_reassignment_metrics() -> None:
    text = "\n".join([
        "# TYPE headwater_reassignment_bytes_to_move gauge",
        'headwater_reassignment_bytes_to_move{broker="1",topic="t",partition="0",replica="3",role="leader"} 100.0',
        "# TYPE headwater_reassignment_rate_bytes_per_second gauge",
        'headwater_reassignment_rate_bytes_per_second{broker="1",topic="t",partition="0",replica="3",role="leader"} 7.5',
        "# TYPE headwater_partitions_led gauge",
        'headwater_partitions_led{broker="1"} 3.0', ""])
    assert parse_metrics(text) == {("t", 0, 3, "leader"): MoveMetric(100.0, 0.0, 7.5, -1.0)}


def test_move_eta_when_one_copy_waits() -> None:
    f = _facts()
    f.ongoing = {("t", 0): Ongoing([1, 2, 3, 4], [3, 4], [1, 2])}
    f.log_dirs[3] = [LogDirFacts("/d3", None, {("t", 0): 50})]
    f.move_metrics = {("t", 0, 3, "leader"): MoveMetric(100, 50, 10.0, 5), ("t", 0, 4, "leader"): MoveMetric(100, 0, 0.0, -1)}
    (m,) = model.moves_model(f)
    assert m["copies"][1]["eta_s"] is None
    assert m["eta_s"] == 15.0  # 150 bytes left at 10 B/s
