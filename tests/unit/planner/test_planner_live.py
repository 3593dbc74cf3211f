"""Snapshot from live-cluster metadata (the dicts kafka-python's admin client returns)."""

from __future__ import annotations

from planner_helpers import replica_sets

from headwater.planner.live import snapshot_from_metadata


def test_metadata_to_snapshot_marks_missing_brokers_dead_and_takes_leader_size() -> None:
    cluster = {"brokers": [{"broker_id": 1, "rack": "a"}, {"broker_id": 2, "rack": "b"}]}
    topics = [
        {
            "name": "t",
            "error_code": 0,
            "partitions": [
                {"partition_index": 0, "leader_id": 2, "replica_nodes": [2, 1, 3]},
                {"partition_index": 1, "leader_id": -1, "replica_nodes": [3, 1]},
            ],
        }
    ]
    log_dirs = [
        {
            "broker": 1,
            "log_dirs": [
                {
                    "topics": [
                        {
                            "name": "t",
                            "partitions": [
                                {"partition_index": 0, "partition_size": 90},
                                {"partition_index": 1, "partition_size": 40},
                            ],
                        }
                    ]
                }
            ],
        },
        {
            "broker": 2,
            "log_dirs": [
                {
                    "topics": [
                        {
                            "name": "t",
                            "partitions": [
                                {"partition_index": 0, "partition_size": 100},
                                {"partition_index": 0, "partition_size": 5, "is_future_key": True},
                            ],
                        }
                    ]
                }
            ],
        },
    ]
    snap = snapshot_from_metadata(cluster, topics, log_dirs, {1: 1000}, 500)
    by_id = {b.id: b for b in snap.brokers}
    assert by_id[3].alive is False and by_id[1].alive and by_id[2].alive
    assert by_id[1].capacity_bytes == 1000 and by_id[2].capacity_bytes == 500
    assert replica_sets(snap) == {("t", 0): [2, 1, 3], ("t", 1): [3, 1]}
    assert snap.partitions["size_bytes"].tolist() == [100, 40]  # leader's size, else the largest replica's
    assert snap.partitions["leader"].tolist() == [2, -1]
