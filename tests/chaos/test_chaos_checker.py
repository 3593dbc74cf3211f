"""The checker can fail: deliberately broken histories and final states, each caught for what it is.

A clean history is built first and shown to pass; each test then breaks one promise (a lost
acknowledged record, replicas diverging below the high watermark, two leaders in one epoch, ...) and
asserts the checker names that violation, and only that kind.
"""

from __future__ import annotations

import dataclasses

from chaos_checker import (
    UNKNOWN_OFFSET,
    Ack,
    BatchInfo,
    BrokerReturn,
    FinalState,
    History,
    Reassignment,
    ReplicaLog,
    check,
    parse_healing_log,
)

PARTITIONS = 2
PER_PARTITION = 6  # messages per partition, one batch of two records each


def clean() -> tuple[History, FinalState]:
    """Three brokers, two partitions, every message acknowledged and present on every replica."""
    h = History(seed=7, nemesis="test", partitions=PARTITIONS)
    consumed: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    for seq in range(PARTITIONS * PER_PARTITION):
        p = seq % PARTITIONS
        h.sent[seq] = p
        offset = len(consumed[p])
        h.acks.append(Ack(p, offset, seq))
        consumed[p].append((offset, seq))
    batches = [BatchInfo(o, o + 1, 0 if o < 4 else 1, 0x1000 + o) for o in range(0, PER_PARTITION, 2)]
    replicas = {p: {b: ReplicaLog(b, PER_PARTITION, list(batches)) for b in (1, 2, 3)} for p in range(PARTITIONS)}
    h.leaders_seen = {(p, 0, 1) for p in range(PARTITIONS)} | {(p, 1, 2) for p in range(PARTITIONS)}
    final = FinalState(consumed, dict.fromkeys(range(PARTITIONS), PER_PARTITION),
                       dict.fromkeys(range(PARTITIONS), (1, 2, 3)), replicas)
    return h, final


def kinds(h: History, f: FinalState) -> set[str]:
    return set(check(h, f).violations)


def test_clean_history_passes_and_verdict_names_the_seed() -> None:
    verdict = check(*clean())
    assert verdict.ok, str(verdict)
    assert "seed=7" in str(verdict) and "OK" in str(verdict)


def test_lost_acknowledged_record_is_caught() -> None:
    h, f = clean()
    # The leader's high watermark was advanced before the ISR had the last batch, and a new leader
    # without it took over: the acknowledged records at offsets 4 and 5 of partition 0 are gone.
    f.consumed[0] = f.consumed[0][:4]
    f.high_watermark[0] = 4
    for log in f.replicas[0].values():
        log.batches, log.high_watermark = log.batches[:2], 4
    verdict = check(h, f)
    assert set(verdict.violations) == {"lost"}, str(verdict)
    assert len(verdict.violations["lost"]) == 2
    assert "VIOLATIONS" in str(verdict) and "CHAOS_SEED=7" in str(verdict)


def test_acknowledged_offset_overwritten_is_caught() -> None:
    h, f = clean()
    f.consumed[1][2] = (2, 99)
    h.sent[99] = 1
    assert "lost" in kinds(h, f)


def test_duplicate_under_idempotence_is_caught() -> None:
    h, f = clean()
    seq = f.consumed[0][1][1]
    f.consumed[0].append((PER_PARTITION, seq))  # a retry written twice
    assert kinds(h, f) >= {"duplicate"}


def test_reordered_partition_is_caught() -> None:
    h, f = clean()
    f.consumed[0][1], f.consumed[0][2] = (1, f.consumed[0][2][1]), (2, f.consumed[0][1][1])
    # The acknowledgements said otherwise too, so "lost" is expected alongside "order".
    assert "order" in kinds(h, f)


def test_record_in_wrong_partition_is_caught() -> None:
    h, f = clean()
    f.consumed[1].append((PER_PARTITION, 10_000))
    h.sent[10_000] = 0
    assert kinds(h, f) == {"order"}


def test_replicas_diverging_below_high_watermark_are_caught() -> None:
    h, f = clean()
    log = f.replicas[1][3]
    log.batches[1] = dataclasses.replace(log.batches[1], crc=0xBAD)
    verdict = check(h, f)
    assert "replicas" in verdict.violations, str(verdict)
    assert any("brokers 1 and 3" in x for x in verdict.violations["replicas"])


def test_replica_short_of_high_watermark_is_caught() -> None:
    h, f = clean()
    f.replicas[0][2].batches.pop()
    assert "replicas" in kinds(h, f)


def test_high_watermark_past_log_end_is_caught() -> None:
    h, f = clean()
    # A follower that took the leader's high watermark without having the data below it.
    f.replicas[1][3].batches.pop()
    f.replicas[1][3].high_watermark = PER_PARTITION
    verdict = check(h, f)
    assert any("past its log end" in x for x in verdict.violations.get("replicas", [])), str(verdict)


def test_divergence_above_high_watermark_is_allowed() -> None:
    h, f = clean()
    # An uncommitted tail on one replica (offsets 6-7, epoch 2) is fine: only the part below the
    # high watermark must match.
    f.replicas[0][3].batches.append(BatchInfo(6, 7, 2, 0x77))
    assert check(h, f).ok


def test_two_leaders_in_one_epoch_are_caught() -> None:
    h, f = clean()
    # A deposed leader kept appending in epoch 1 at offset 6 while the new leader, wrongly in the
    # same epoch, appended a different batch there.
    f.replicas[0][1].batches.append(BatchInfo(6, 7, 1, 0xAAAA))
    f.replicas[0][2].batches.append(BatchInfo(6, 6, 1, 0xBBBB))
    verdict = check(h, f)
    assert set(verdict.violations) == {"epochs"}, str(verdict)
    assert "two leaders in one epoch" in verdict.violations["epochs"][0]


def test_zookeeper_naming_two_leaders_for_one_epoch_is_caught() -> None:
    h, f = clean()
    h.leaders_seen.add((1, 1, 3))
    assert kinds(h, f) == {"epochs"}


def test_epoch_going_back_in_a_log_is_caught() -> None:
    h, f = clean()
    log = f.replicas[1][2]
    log.batches[2] = dataclasses.replace(log.batches[2], leader_epoch=0)
    log.batches[1] = dataclasses.replace(log.batches[1], leader_epoch=1)
    assert "epochs" in kinds(h, f)


def test_reassignment_ending_elsewhere_is_caught() -> None:
    h, f = clean()
    h.reassignments[0] = Reassignment(0, "start", ((2, 3, 4),))
    h.reassignments[1] = Reassignment(1, "cancel", ((1, 2, 3),))
    verdict = check(h, f)
    assert set(verdict.violations) == {"reassignment"}, str(verdict)
    assert len(verdict.violations["reassignment"]) == 1 and "partition 0" in verdict.violations["reassignment"][0]


def test_reassignment_left_running_is_caught() -> None:
    h, f = clean()
    f.ongoing[1] = ((4,), (1,))
    assert kinds(h, f) == {"reassignment"}


def test_acknowledgement_without_an_offset_needs_the_message_in_its_partition() -> None:
    h, f = clean()
    # librdkafka inferred these deliveries from a later batch's acknowledgement: no offset reported.
    h.acks = [Ack(a.partition, UNKNOWN_OFFSET, a.seq) if a.seq in (0, 3) else a for a in h.acks]
    assert check(h, f).ok, str(check(h, f))
    # Message 0 is not in partition 0 after all (its place holds nothing): lost.
    f.consumed[0] = [(o, seq) for o, seq in f.consumed[0] if seq != 0]
    verdict = check(h, f)
    assert set(verdict.violations) == {"lost"}, str(verdict)
    assert "message 0 acknowledged on partition 0 (offset not reported) is not in that partition" in str(verdict)


HEALING_LOG = """\
2026-11-26 17:00:01,250 INFO [broker 11] headwater.controller: something else
2026-11-26 17:00:01,500 ERROR [broker 11] headwater.self_healing: controller 11: self-healing tick failed
Traceback (most recent call last):
  File "headwater/planner/snapshot.py", line 375, in check_rf_feasible
    raise PlannerError(
headwater.planner.errors.PlannerError: replication factor 4 (of partition chaos-1) is larger than the 3 broker(s)
2026-11-26 17:00:02,500 WARNING [broker 11] headwater.self_healing: self-healing: broker 3 (gone 3 s); started 2 moves: \
chaos-0 [1, 2, 3] -> [1, 2, 4], chaos-txn-1 [3, 1, 2] -> [4, 1, 2]
2026-11-26 17:00:06,000 WARNING [broker 11] headwater.self_healing: self-healing: broker 3 is back; cancelled the \
healing moves still copying: chaos-0
2026-11-26 17:00:07,000 WARNING [broker 11] headwater.self_healing: self-healing: moves completed; preferred leaders \
elected for chaos-txn-1
"""


def healed() -> tuple[History, FinalState]:
    """Broker 3 died; self-healing moved chaos-0 and chaos-txn-1 away from it; it came back while
    chaos-0 still copied (cancelled: back at [1, 2, 3]) and after chaos-txn-1 completed."""
    h, f = clean()
    h.healing = parse_healing_log(HEALING_LOG)
    f.topics = {"chaos": dict(f.assignment), "chaos-txn": {0: (1, 2, 3), 1: (4, 1, 2)}}
    return h, f


def test_healing_log_lines_are_parsed() -> None:
    failed, *actions = parse_healing_log(HEALING_LOG)
    assert failed.kind == "failed" and failed.error.startswith("headwater.planner.errors.PlannerError: replication")
    assert [a.kind for a in actions] == ["heal", "cancel", "elect"]
    assert actions[0].brokers == (3,)
    assert actions[0].moves == ((("chaos", 0), (1, 2, 3), (1, 2, 4)), (("chaos-txn", 1), (3, 1, 2), (4, 1, 2)))
    assert actions[1].broker == 3 and actions[1].partitions == (("chaos", 0),)
    assert actions[2].partitions == (("chaos-txn", 1),)
    assert actions[1].at - actions[0].at == 3.5


def test_healing_that_cancelled_and_completed_passes_and_is_counted() -> None:
    verdict = check(*healed())
    assert verdict.ok, str(verdict)
    assert (verdict.stats["heals"], verdict.stats["heal_moves"], verdict.stats["cancels"]) == (1, 2, 1)
    assert "self-healing: 1 heals (2 moves), 1 cancels (1 moves), 1 elections, 1 failed ticks" in str(verdict)


def test_a_cancelled_healing_move_ending_without_the_returned_broker_is_caught() -> None:
    h, f = healed()
    f.topics["chaos"][0] = f.assignment[0] = (1, 2, 4)
    f.replicas[0][4] = dataclasses.replace(f.replicas[0][3], broker=4)
    verdict = check(h, f)
    assert set(verdict.violations) == {"self-healing"}, str(verdict)
    assert "chaos-0: its healing move was cancelled when broker 3 came back" in str(verdict)


def test_a_healing_move_still_copying_after_its_broker_returned_is_caught() -> None:
    h, f = healed()
    t = h.healing[2].at if h.healing else 0.0
    h.returns = [BrokerReturn(3, t, {("chaos", 0): (1, 2, 4)}, {("chaos", 0): (1, 2, 4)}, 5.0)]
    assert kinds(h, f) == {"self-healing"}


def test_a_partition_left_under_its_replication_factor_is_caught() -> None:
    h, f = healed()
    f.topics["chaos-txn"][0] = (1, 2)
    assert kinds(h, f) == {"replication"}


def test_the_workload_check_accepts_where_a_later_heal_took_the_partition() -> None:
    h, f = healed()
    # The workload's last request on chaos-1 ended at [1, 2, 3] before broker 3 died; then a heal
    # moved it (completed) to [1, 2, 4].
    h.healing = [*(h.healing or []), *parse_healing_log(
        "2026-11-26 17:00:03,000 WARNING [broker 11] headwater.self_healing: self-healing: broker 3 (gone 4 s); "
        "started 1 moves: chaos-1 [1, 2, 3] -> [1, 2, 4]")]
    h.reassignments[1] = Reassignment(1, "start", ((1, 2, 3),), at=h.healing[0].at)
    f.assignment[1] = f.topics["chaos"][1] = (1, 2, 4)
    f.replicas[1][4] = dataclasses.replace(f.replicas[1][3], broker=4)
    assert check(h, f).ok, str(check(h, f))
    # A request after that heal is held to its own target.
    h.reassignments[1] = Reassignment(1, "start", ((1, 2, 3),), at=h.healing[-1].at + 2)
    assert kinds(h, f) == {"reassignment"}
