"""The CI subset of the chaos suite: three nemeses, one fixed seed each, one fault each.

Each test builds a three-broker cluster with every process in its own network namespace, runs an
idempotent acks=all producer, applies the fault, heals it, and hands the recorded history and the
replicas' segment files to the checker. Besides a clean verdict, each test asserts that the fault
really bit, so a harness whose faults do nothing cannot pass. ``make chaos`` runs the randomized
suite (every nemesis, many seeds, with reassignments). The pause and disk-full tests also run the
topic create/delete workload, and every test the transactional workload (its commits and aborts on a
topic of its own, checked read_committed).
"""

from __future__ import annotations

from pathlib import Path

from chaos_run import SESSION_TIMEOUT_MS, TXNS_TO_CHECK, Outcome, Scenario, run_scenario


def assert_transactions_ran(outcome: Outcome) -> None:
    """The transactional checks had something to check: commits, and aborts whose records are in the
    log (read_uncommitted) and had to be hidden from read_committed."""
    stats, final = outcome.verdict.stats, outcome.final.txn
    assert final is not None and stats["txns_committed"] >= TXNS_TO_CHECK, f"too few transactions committed: {outcome.report()}"
    in_log = {value for records in final.uncommitted.values() for _, value in records}
    aborted = [value for t in outcome.history.txns if t.outcome == "aborted" for _, value in t.values]
    assert any(value in in_log for value in aborted), f"no aborted record reached the log: {outcome.report()}"


def test_leader_isolated_from_followers_but_not_zookeeper(tmp_path: Path) -> None:
    outcome = run_scenario(Scenario("leader-followers", seed=1, rounds=1, fault_s=(6.0, 6.0), txn=True), tmp_path)
    print(outcome.report())
    assert outcome.ok, outcome.report()
    assert_transactions_ran(outcome)
    # The leader still held its ZooKeeper session, so it kept leading, but acks=all could not
    # complete without its followers: its partition stood still from SETTLE_S into the fault until
    # the heal. The producer sends ~100 a second to it, so a fault without effect would show ~400.
    [(partition, began, healed)] = outcome.fault_windows
    assert healed - began < 20, f"partition {partition} kept acknowledging while its leader was cut off: {outcome.report()}"
    assert outcome.verdict.stats["acked"] > 500


def test_leader_paused_longer_than_its_session(tmp_path: Path) -> None:
    pause_s = SESSION_TIMEOUT_MS / 1000 + 2
    # With the topic create/delete workload beside it: its checks cost a few seconds of reading back.
    outcome = run_scenario(Scenario("pause", seed=1, rounds=1, fault_s=(pause_s, pause_s), churn=True, txn=True), tmp_path)
    print(outcome.report())
    assert outcome.ok, outcome.report()
    assert_transactions_ran(outcome)
    lives = [life for name_lives in outcome.history.churn.values() for life in name_lives]
    assert any(life.deleted == "ok" for life in lives), f"no topic was deleted: {outcome.report()}"
    assert sum(len(life.acks) for life in lives) >= 5, f"no churn records acknowledged: {outcome.report()}"
    # The session expired under the stopped process, so the controller elected another leader: a
    # new leader epoch with a different leader shows up in ZooKeeper.
    [(partition, _began, _healed)] = outcome.fault_windows
    leaders = {leader for p, _epoch, leader in outcome.history.leaders_seen if p == partition}
    assert len(leaders) >= 2, f"leadership of partition {partition} never moved: {outcome.report()}"


def test_leader_disk_full(tmp_path: Path) -> None:
    """Seed 1 of disk-full, the run that found a duplicate (the pending acks of the failed dir were
    answered KAFKA_STORAGE_ERROR, and librdkafka renumbered their retry under a new epoch), with the
    topic create/delete workload that found deletions stuck on an offline dir."""
    outcome = run_scenario(Scenario("disk-full", seed=1, rounds=1, fault_s=(4.0, 4.0), churn=True, txn=True), tmp_path)
    print(outcome.report())
    assert outcome.ok, outcome.report()
    assert_transactions_ran(outcome)
    # The leader's writes to its full dir failed and leadership moved off it.
    [(partition, _began, _healed)] = outcome.fault_windows
    leaders = {leader for p, _epoch, leader in outcome.history.leaders_seen if p == partition}
    assert len(leaders) >= 2, f"leadership of partition {partition} never moved: {outcome.report()}"
