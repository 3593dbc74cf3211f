"""The console's incremental poll (reader.TopicSegments, model.ModelCache, reader.SnapshotJson)
must give exactly what decoding and building everything afresh gives: the expected answers are
kafka-python's full decode of the same bytes and the model functions run without a cache, over
randomised sequences of polls in which partitions, moves, sizes, metrics and configs change."""

from __future__ import annotations

import copy
import json
import random
import uuid
from typing import Any

from kafka.protocol.admin import ListPartitionReassignmentsResponse as ListResponse
from kafka.protocol.metadata import MetadataResponse

from headwater.admin.reassign import Ongoing
from headwater.console import model
from headwater.console.model import BrokerFacts, Facts, LogDirFacts, MoveMetric, PartitionFacts
from headwater.console.reader import SnapshotJson, TopicSegments

Parts = dict[int, tuple[int, int, list[int]]]


def _metadata(topics: dict[str, Parts], rng: random.Random) -> Any:
    B = MetadataResponse.MetadataResponseBroker
    T = MetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition
    r = MetadataResponse(
        version=12, throttle_time_ms=0, cluster_id="cid", controller_id=1,
        brokers=[B(node_id=i, host=f"h{i}", port=9000 + i, rack=None if i % 2 else "r") for i in (1, 2, 3)],
        topics=[T(error_code=0, name=n, topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, n), is_internal=False,
                  authorized_operations=None,
                  partitions=[P(error_code=0, partition_index=p, leader_id=leader, leader_epoch=e, replica_nodes=rs,
                                isr_nodes=rs[:1 + e % 2], offline_replicas=[])
                              for p, (leader, e, rs) in sorted(parts.items())])
                for n, parts in topics.items()])
    r.with_header(correlation_id=rng.randint(1, 1000))
    return r


def _reassignments(topics: dict[str, Parts], rng: random.Random) -> Any:
    T = ListResponse.OngoingTopicReassignment
    P = T.OngoingPartitionReassignment
    r = ListResponse(version=0, throttle_time_ms=0, error_code=0, error_message=None,
                     topics=[T(name=n, partitions=[P(partition_index=p, replicas=rs, adding_replicas=rs[-1:],
                                                     removing_replicas=rs[:1])
                                                   for p, (_leader, _e, rs) in sorted(parts.items())])
                             for n, parts in topics.items()])
    r.with_header(correlation_id=rng.randint(1, 1000))
    return r


def test_topic_segments_decode_as_kafka_python_does_and_reuse_unchanged_topics() -> None:
    rng = random.Random(5)
    for cls, api, version, build in ((MetadataResponse, 3, 12, _metadata), (ListResponse, 46, 0, _reassignments)):
        seg = TopicSegments()
        topics: dict[str, Parts] = {f"t{i}": {p: (1, 0, [1, 2, 4]) for p in range(rng.randint(0, 40))}
                                    for i in range(6)}
        prev = None
        reused = 0
        for step in range(150):
            what = rng.random()
            if what < 0.5 and topics:
                t = rng.choice(list(topics))
                if topics[t]:
                    p = rng.choice(list(topics[t]))
                    leader, e, rs = topics[t][p]
                    topics[t] = {**topics[t], p: (leader, e + 1, rs if rng.random() < .5 else rs[:2])}
            elif what < 0.6 and topics:
                topics.pop(rng.choice(list(topics)), None)
            elif what < 0.7:
                topics[f"n{step}"] = {p: (2, 0, [2, 3]) for p in range(rng.randint(0, 5))}
            elif what < 0.75 and topics:
                t = rng.choice(list(topics))
                topics = {(k + "x" if k == t else k): v for k, v in topics.items()}
            full = bytes(build(topics, rng).encode(header=True))
            got = seg.decode(cls, api, version, full)
            want = cls.decode(full, version=version, header=True)
            assert got is not None, step
            assert got.topics == want.topics and [t.name for t in got.topics] == [t.name for t in want.topics], step
            for f in ("throttle_time_ms", "cluster_id", "controller_id", "brokers", "error_code", "error_message"):
                if hasattr(want, f):
                    assert getattr(got, f) == getattr(want, f), (f, step)
            if prev is not None:
                for t in got.topics:
                    old = next((o for o in prev.topics if o.name == t.name), None)
                    if old is not None and old == t:
                        assert old is t, ("an unchanged topic is the last poll's object", step, t.name)
                        reused += 1
            prev = got
        assert reused > 0


def test_cached_page_models_equal_the_models_built_afresh() -> None:
    rng = random.Random(7)
    for trial in range(12):
        cache = model.ModelCache()
        r_new, r_old, enc = model.RateTracker(), model.RateTracker(), SnapshotJson()
        topics = {f"t{i}": {p: PartitionFacts(1, (1, 2), (1, 2)) for p in range(rng.randint(1, 30))} for i in range(3)}
        ongoing = {(t, p): Ongoing([1, 2, 4], [4], [2]) for t, parts in topics.items() for p in parts if rng.random() < 0.7}
        dirs = {b: {(t, p): rng.randint(0, 1000) for t, parts in topics.items() for p in parts} for b in (1, 2, 4)}
        metrics: dict[tuple[str, int, int, str], MoveMetric] = {}
        configs: dict[str, dict[str, str | None]] = {t: {"follower.replication.throttled.replicas": ",".join(f"{p}:4" for p in parts if rng.random() < 0.5)}
                   for t, parts in topics.items()}
        bconf: dict[int, dict[str, str | None]] = {1: {"leader.replication.throttled.rate": "100"}, 4: {}}
        for step in range(25):
            what = rng.random()
            if what < 0.5:
                b = rng.choice([1, 2, 4])
                d = dict(dirs[b])
                k = rng.choice(list(d))
                d[k] += rng.randint(0, 50)
                dirs[b] = d
            elif what < 0.6 and ongoing:
                ongoing = dict(ongoing)
                ongoing.pop(rng.choice(list(ongoing)))
            elif what < 0.7:
                metrics = dict(metrics)
                t, p = rng.choice(list(ongoing) or [("t0", 0)])
                metrics[(t, p, 4, rng.choice(["leader", "follower"]))] = MoveMetric(
                    100, rng.randint(0, 100), rng.random(), rng.choice([-1, 3.0]))
            elif what < 0.75:
                configs = copy.deepcopy(configs)
                configs[rng.choice(list(configs))]["follower.replication.throttled.replicas"] = "*"
            elif what < 0.8:
                bconf = ({1: {}, 4: {"follower.replication.throttled.rate": "5"}} if rng.random() < 0.5
                         else {1: {"leader.replication.throttled.rate": "100"}})
            elif what < 0.85:
                topics = dict(topics)
                t = rng.choice(list(topics))
                parts = dict(topics[t])
                parts[rng.choice(list(parts))] = PartitionFacts(2, (1, 2), (1,))
                topics[t] = parts
            f = Facts(taken_at=step, brokers={b: BrokerFacts(b, "h", 1, None) for b in (1, 2, 4)}, topics=topics,
                      topic_configs=configs, broker_configs=bconf,
                      log_dirs={b: [LogDirFacts("/d", None, dirs[b])] for b in dirs}, ongoing=ongoing,
                      move_metrics=metrics)
            sizes = cache.sizes_for(f)
            r_new.observe_moves(float(step), ongoing, sizes)
            m_new = model.moves_model(f, r_new, sizes, cache)
            r_old.observe(float(step), model.copied_bytes(f))
            assert m_new == model.moves_model(f, r_old), (trial, step)
            h_new = model.health(f, cache)
            t_new = model.topics_model(f, sizes, cache)
            assert model.brokers_model(f, cache) == model.brokers_model(f) and h_new == model.health(f)
            assert t_new == model.topics_model(f) and model.heatmap_model(f, sizes, cache) == model.heatmap_model(f)
            snap = {"taken_at": step, "topics": t_new, "health": h_new,
                    "reassignments": {"moves": m_new, "overall": model.overall(m_new)}}
            assert enc.text(snap) == json.dumps(snap)
