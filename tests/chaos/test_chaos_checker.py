"""The checker can fail: deliberately broken histories and final states, each caught for what it is.

A clean history is built first and shown to pass; each test then breaks one promise (a lost
acknowledged record, replicas diverging below the high watermark, two leaders in one epoch, ...) and
asserts the checker names that violation, and only that kind.
"""

from __future__ import annotations

import dataclasses

from chaos_checker import UNKNOWN_OFFSET, Ack, BatchInfo, FinalState, History, Reassignment, ReplicaLog, check

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
