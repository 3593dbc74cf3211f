"""The transactional checks on hand-built histories: a clean one passes, and each broken promise (an
aborted value read committed, a committed transaction lost, half a transaction visible, a value read
twice, out of order or never written, the topic's replicas diverging) is reported as that kind and
names the transaction.
"""

from __future__ import annotations

import dataclasses

from chaos_checker import BatchInfo, FinalState, History, ReplicaLog, check
from chaos_txn_checker import Txn, TxnFinal

PARTITIONS = 3


def txn(n: int, parts: list[int], outcome: str, producer: int = 1, note: str = "") -> Txn:
    return Txn(n, [(p, f"t{n}/{i}") for i, p in enumerate(parts)], outcome, producer, note)


def clean() -> tuple[History, FinalState]:
    """Seven transactions on a 3-partition topic: committed, aborted (by choice, or by the next
    producer's fencing before the commit was asked), and unknown ones that ended either way."""
    h = History(seed=5, nemesis="test", partitions=1)
    h.txns = [
        txn(0, [0, 1, 2], "committed"),
        txn(1, [1, 2, 0, 1], "aborted", note="chosen"),
        txn(2, [2, 0, 1], "committed"),
        txn(3, [0, 1, 2], "unknown", note="_TIMED_OUT: commit"),  # it did commit
        txn(4, [1, 2, 0], "unknown", note="_FENCED: commit"),  # it did not
        txn(5, [2, 0, 1], "aborted", note="_FENCED: produce"),  # failed before the commit
        txn(6, [0, 1, 2, 0], "committed", producer=2),
    ]
    visible = {0, 2, 3, 6}
    committed: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
    uncommitted: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
    end = dict.fromkeys(range(PARTITIONS), 0)
    for t in h.txns:
        for p, value in t.values:
            uncommitted[p].append((end[p], value))
            if t.id in visible:
                committed[p].append((end[p], value))
            end[p] += 1
        for p in {p for p, _ in t.values}:
            end[p] += 1  # the transaction's marker
    replicas = {p: {b: ReplicaLog(b, end[p], [BatchInfo(0, end[p] - 1, 0, 0x100 + p)]) for b in (1, 2, 3)}
                for p in range(PARTITIONS)}
    final = FinalState({0: []}, {0: 0}, {0: (1, 2, 3)}, {0: {}},
                       txn=TxnFinal(committed, uncommitted, dict(end), dict.fromkeys(range(PARTITIONS), (1, 2, 3)),
                                    replicas))
    return h, final


def offset_of(f: FinalState, value: str) -> tuple[int, int]:
    assert f.txn is not None
    return next((p, o) for p, records in f.txn.uncommitted.items() for o, v in records if v == value)


def show(f: FinalState, value: str) -> None:
    """Make a value read committed, at its place in the log."""
    assert f.txn is not None
    p, o = offset_of(f, value)
    f.txn.committed[p] = sorted([*f.txn.committed[p], (o, value)])


def hide(f: FinalState, *values: str) -> None:
    assert f.txn is not None
    for p in f.txn.committed:
        f.txn.committed[p] = [(o, v) for o, v in f.txn.committed[p] if v not in values]


def violations(h: History, f: FinalState) -> dict[str, list[str]]:
    return check(h, f).violations


def test_clean_transactional_history_passes() -> None:
    verdict = check(*clean())
    assert verdict.ok, str(verdict)
    assert "7 transactions (3 committed, 2 aborted, 2 unknown; 13 values read committed)" in str(verdict)


def test_aborted_transaction_read_committed_is_caught() -> None:
    h, f = clean()
    for _, value in h.txns[1].values:
        show(f, value)
    v = violations(h, f)
    assert set(v) == {"txn-aborted-read"}, v
    assert v["txn-aborted-read"][0].startswith("transaction 1 (aborted; producer #1, 4 values on partitions [0, 1, 2])")
    assert "'t1/0' at 1@2, 't1/1' at 2@2" in v["txn-aborted-read"][0]
    # Aborted by the next producer's init_transactions (fenced before the commit): the same.
    h, f = clean()
    for _, value in h.txns[5].values:
        show(f, value)
    v = violations(h, f)
    assert set(v) == {"txn-aborted-read"}, v
    assert "transaction 5 (aborted: _FENCED: produce;" in v["txn-aborted-read"][0]


def test_one_aborted_value_read_committed_is_also_not_atomic() -> None:
    h, f = clean()
    show(f, "t1/2")
    v = violations(h, f)
    assert set(v) == {"txn-aborted-read", "txn-partial"}, v
    assert "1 of 4 values read committed" in v["txn-partial"][0]


def test_committed_transaction_lost_is_caught() -> None:
    h, f = clean()
    hide(f, *(value for _, value in h.txns[2].values))
    verdict = check(h, f)
    assert set(verdict.violations) == {"txn-lost"}, str(verdict)
    [item] = verdict.violations["txn-lost"]
    assert item.startswith("transaction 2 (committed; producer #1, 3 values on partitions [0, 1, 2]): 3 of 3 values")
    # Where each one is: in the log but behind an abort marker, or not written at all.
    assert "'t2/0' (in the log at 2@" in item and "read_uncommitted only" in item
    assert f"- txn-lost: {item}" in str(verdict) and "CHAOS_SEED=5" in str(verdict)
    h, f = clean()
    hide(f, "t2/1")
    assert f.txn is not None
    f.txn.uncommitted = {p: [(o, v) for o, v in records if v != "t2/1"] for p, records in f.txn.uncommitted.items()}
    assert "'t2/1' (not in the log)" in violations(h, f)["txn-lost"][0]


def test_committed_transaction_half_lost_is_lost_and_not_atomic() -> None:
    h, f = clean()
    hide(f, "t6/3")
    v = violations(h, f)
    assert set(v) == {"txn-lost", "txn-partial"}, v
    assert "transaction 6 (committed; producer #2" in v["txn-partial"][0]
    assert "3 of 4 values read committed" in v["txn-partial"][0] and "missing: 't6/3'" in v["txn-partial"][0]


def test_unknown_transaction_may_end_either_way_but_not_half() -> None:
    h, f = clean()
    hide(f, *(value for _, value in h.txns[3].values))  # committed -> absent: allowed
    for _, value in h.txns[4].values:  # absent -> committed: allowed
        show(f, value)
    assert check(h, f).ok, str(check(h, f))
    hide(f, "t4/1")
    v = violations(h, f)
    assert set(v) == {"txn-partial"}, v
    assert v["txn-partial"][0].startswith("transaction 4 (unknown: _FENCED: commit;")


def test_value_read_committed_twice_is_caught() -> None:
    h, f = clean()
    assert f.txn is not None
    p, _ = offset_of(f, "t6/3")
    f.txn.committed[p].append((f.txn.high_watermark[p], "t6/3"))  # a retry written again
    v = violations(h, f)
    assert set(v) == {"txn-duplicate"}, v
    assert "'t6/3' of transaction 6 (committed; producer #2, 4 values on partitions [0, 1, 2]) is read committed 2 times" \
        in v["txn-duplicate"][0]


def test_values_out_of_order_or_in_the_wrong_partition_are_caught() -> None:
    h, f = clean()
    assert f.txn is not None
    records = f.txn.committed[0]
    (o1, v1), (o2, v2) = records[0], records[1]
    records[0], records[1] = (o1, v2), (o2, v1)
    v = violations(h, f)
    assert set(v) == {"txn-order"}, v
    assert "comes after" in v["txn-order"][0]
    h, f = clean()
    assert f.txn is not None
    f.txn.committed[0].append((f.txn.high_watermark[0], "t6/1"))  # t6/1 was sent to partition 1
    v = violations(h, f)
    assert "txn-order" in v and "was sent to partition 1 but is read at 0@" in v["txn-order"][0], v


def test_value_no_transaction_wrote_is_caught() -> None:
    h, f = clean()
    assert f.txn is not None
    f.txn.committed[2].append((f.txn.high_watermark[2], "t99/0"))
    v = violations(h, f)
    assert set(v) == {"txn-stray"}, v


def test_transactional_topic_replicas_diverging_are_caught() -> None:
    h, f = clean()
    assert f.txn is not None
    log = f.txn.replicas[1][3]
    log.batches[0] = dataclasses.replace(log.batches[0], crc=0xBAD)
    v = violations(h, f)
    # A different batch at the same offsets in the same leader epoch: two leaders in one epoch, too.
    assert set(v) == {"replicas", "epochs"}, v
    assert v["replicas"][0].startswith("transactional topic: partition 1: brokers 1 and 3 differ")
    assert v["epochs"][0].startswith("transactional topic: partition 1: two different batches in leader epoch 0")
