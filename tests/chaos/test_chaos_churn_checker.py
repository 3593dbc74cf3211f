"""The checker's topic create/delete rules and the unavailability window, on hand-built histories.

Each broken case changes one thing in a clean churn history (a deleted topic that left a znode or a
partition directory, a recreated topic holding its predecessor's records, an acknowledged record
gone, a topic that vanished without a delete) and asserts it is reported as that, and only that.
"""

from __future__ import annotations

from chaos_checker import ChurnFinal, FinalState, History, Incarnation, check
from chaos_run import Fault, percentile, summarize_windows, unavailability_ms


def clean() -> tuple[History, FinalState]:
    """churn-0: created, written, deleted, created again and written; churn-1: created, written, deleted."""
    h = History(seed=3, nemesis="test", partitions=1)
    h.churn["churn-0"] = [
        Incarnation(1, "ok", "ok", [(0, 0, "churn-0/1/1"), (1, 0, "churn-0/1/2")]),
        Incarnation(2, "ok", "none", [(0, 0, "churn-0/2/3"), (1, 0, "churn-0/2/4"), (0, 1, "churn-0/2/5")]),
    ]
    h.churn["churn-1"] = [Incarnation(1, "ok", "ok", [(0, 0, "churn-1/1/6")])]
    final = FinalState({0: []}, {0: 0}, {0: (1, 2, 3)}, {0: {}})
    final.churn["churn-0"] = ChurnFinal(
        exists=True, leftover_znodes=[], assignment={0: (1, 2, 3), 1: (2, 3, 4)},
        records={0: [(0, "churn-0/2/3"), (1, "churn-0/2/5")], 1: [(0, "churn-0/2/4")]},
        partition_dirs={1: ["churn-0-0"], 2: ["churn-0-0", "churn-0-1"], 3: ["churn-0-0", "churn-0-1"], 4: ["churn-0-1"]})
    final.churn["churn-1"] = ChurnFinal(False, [], {}, {}, {b: [] for b in (1, 2, 3, 4)})
    return h, final


def test_clean_churn_history_passes() -> None:
    verdict = check(*clean())
    assert verdict.ok, str(verdict)
    assert "3 churn topic incarnations" in str(verdict)


def test_deleted_topic_leaving_a_znode_or_a_partition_directory_is_caught() -> None:
    h, f = clean()
    f.churn["churn-1"].leftover_znodes = ["/config/topics/churn-1"]
    f.churn["churn-1"].partition_dirs[2] = ["churn-1-0"]
    verdict = check(h, f)
    assert set(verdict.violations) == {"churn"}, str(verdict)
    assert len(verdict.violations["churn"]) == 2
    assert "/config/topics/churn-1" in str(verdict) and "broker 2 still has ['churn-1-0']" in str(verdict)


def test_recreated_topic_holding_its_predecessors_record_is_caught() -> None:
    h, f = clean()
    f.churn["churn-0"].records[1].insert(0, (0, "churn-0/1/2"))
    f.churn["churn-0"].records[1][1] = (1, "churn-0/2/4")
    verdict = check(h, f)
    # The old record also sits where the new incarnation's acknowledged one should be.
    assert set(verdict.violations) == {"churn", "lost"}, str(verdict)
    assert "not written to this incarnation" in verdict.violations["churn"][0]


def test_stray_directory_of_an_earlier_incarnation_is_caught() -> None:
    h, f = clean()
    f.churn["churn-0"].partition_dirs[4] = ["churn-0-0", "churn-0-1"]  # broker 4 is not a replica of partition 0
    verdict = check(h, f)
    assert set(verdict.violations) == {"churn"}, str(verdict)
    assert "broker 4 holds ['churn-0-0']" in verdict.violations["churn"][0]


def test_acknowledged_record_of_the_live_incarnation_lost_is_caught() -> None:
    h, f = clean()
    f.churn["churn-0"].records[0] = f.churn["churn-0"].records[0][:1]
    verdict = check(h, f)
    assert set(verdict.violations) == {"lost"}, str(verdict)
    assert "churn-0/2/5" in verdict.violations["lost"][0]


def test_records_acknowledged_on_a_deleted_incarnation_are_not_lost() -> None:
    h, f = clean()
    h.churn["churn-1"][0].acks += [(0, 1, "churn-1/1/7"), (0, 2, "churn-1/1/8")]
    assert check(h, f).ok


def test_topic_gone_without_a_delete_and_topic_kept_after_an_acknowledged_delete_are_caught() -> None:
    h, f = clean()
    h.churn["churn-1"][0].deleted = "none"
    h.churn["churn-0"][1].deleted = "ok"
    verdict = check(h, f)
    assert set(verdict.violations) == {"churn"}, str(verdict)
    text = str(verdict)
    assert "churn-1 (incarnation 1) vanished without a delete" in text
    assert "churn-0 (incarnation 2) still exists after its delete was acknowledged" in text
    # Seen gone in the middle of the run, recreated since: still reported.
    h, f = clean()
    h.churn["churn-0"][0].deleted = "vanished"
    verdict = check(h, f)
    assert set(verdict.violations) == {"churn"}, str(verdict)
    assert "churn-0 (incarnation 1) vanished without a delete" in str(verdict)
    h, f = clean()
    # A delete whose answer was lost allows either end.
    h.churn["churn-1"][0].deleted = "unknown"
    h.churn["churn-0"][1].deleted = "unknown"
    assert check(h, f).ok


def test_unavailability_window_counts_from_the_fault_to_the_first_ack_of_a_later_send() -> None:
    h = History(seed=1, nemesis="test", partitions=2)
    # seq: (partition, sent, acked). Fault at t=10 on partition 0.
    sends = {0: (0, 9.9, 14.0), 1: (1, 10.1, 10.2), 2: (0, 10.5, 13.2), 3: (0, 11.0, 13.1), 4: (1, 11.5, 11.6)}
    for seq, (p, sent, acked) in sends.items():
        h.sent[seq], h.sent_at[seq], h.acked_at[seq] = p, sent, acked
    # seq 0 was sent before the fault (its late ack does not count); seq 3's ack came first.
    assert unavailability_ms(h, Fault("pause", 10.0, (0,))) == 3100.0
    # Several partitions: the fault lasts until the slowest is back.
    assert unavailability_ms(h, Fault("loss", 10.0, (0, 1))) == 3100.0
    assert unavailability_ms(h, Fault("loss", 10.0, (1,))) == 200.0
    # No partition of the topic hit, or nothing acknowledged afterwards: not measured.
    assert unavailability_ms(h, Fault("pause", 10.0, ())) is None
    assert unavailability_ms(h, Fault("pause", 20.0, (0,))) is None


def test_summary_gives_p50_and_p99_per_nemesis() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert percentile([float(x) for x in range(1, 101)], 0.99) == 99.0
    rows = summarize_windows([{"nemesis": "pause", "partitions": [0], "window_ms": 100.0},
                              {"nemesis": "pause", "partitions": [1], "window_ms": 300.0},
                              {"nemesis": "pause", "partitions": [], "window_ms": None},
                              {"nemesis": "pause", "partitions": [2], "window_ms": None},
                              {"nemesis": "kill", "partitions": [0], "window_ms": 50.0}])
    assert rows == {"kill": {"p50_ms": 50.0, "p99_ms": 50.0, "faults": 1, "no_partition": 0, "no_ack": 0},
                    "pause": {"p50_ms": 100.0, "p99_ms": 300.0, "faults": 2, "no_partition": 1, "no_ack": 1}}
